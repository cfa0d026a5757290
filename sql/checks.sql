-- name: rct_events_campaign
-- Parameters: number of levels, campaign. Rows, then the rows breaking each rule, over every loaded day.
SELECT count(*),
       count(*) FILTER (WHERE level < 0 OR level >= ?),
       count(*) FILTER (WHERE response NOT IN (0, 1)),
       count(*) FILTER (WHERE response < 0 OR response <> floor(response)),
       count(*) FILTER (WHERE isnan(response) OR isinf(response)),
       count(*) FILTER (WHERE cost < 0 OR isnan(cost) OR isinf(cost)),
       count(*) FILTER (WHERE propensity IS NOT NULL AND (propensity <= 0 OR propensity > 1))
FROM rct_events WHERE campaign = ?;

-- name: incentive_mismatch_campaign
-- Parameters: the level indexes, their incentives (two lists of equal length), campaign.
SELECT count(*) FROM rct_events e
LEFT JOIN (SELECT unnest(?::INTEGER[]) AS level, unnest(?::DOUBLE[]) AS incentive) g USING (level)
WHERE e.campaign = ? AND (g.incentive IS NULL OR g.incentive <> e.incentive);
