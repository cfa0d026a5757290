-- name: rct_events_partition
-- Parameters: number of levels, campaign, day.
SELECT count(*),
       count(*) FILTER (WHERE level < 0 OR level >= ?),
       count(*) FILTER (WHERE response NOT IN (0, 1)),
       count(*) FILTER (WHERE response < 0 OR response <> floor(response)),
       count(*) FILTER (WHERE isnan(response) OR isinf(response)),
       count(*) FILTER (WHERE cost < 0 OR isnan(cost) OR isinf(cost)),
       count(*) FILTER (WHERE propensity IS NOT NULL AND (propensity <= 0 OR propensity > 1))
FROM rct_events WHERE campaign = ? AND event_date = CAST(? AS DATE);

-- name: incentive_mismatch
-- Parameters: campaign, day, the level indexes, their incentives (two lists of equal length).
SELECT count(*) FROM rct_events e
LEFT JOIN (SELECT unnest(?::INTEGER[]) AS level, unnest(?::DOUBLE[]) AS incentive) g USING (level)
WHERE e.campaign = ? AND e.event_date = CAST(? AS DATE) AND (g.incentive IS NULL OR g.incentive <> e.incentive);
