"""When runs start: the jobs, the daily schedule, the sensors and the assets' automation conditions."""
