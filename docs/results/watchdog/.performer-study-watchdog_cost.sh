output folder of launch/studies/watchdog_cost.sh (launch/studies/output_dir.sh)
