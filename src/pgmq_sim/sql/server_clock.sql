select clock_timestamp()
