output folder of launch/studies/watchdog_cost.sh (launch/scripts/output_dir.sh)
