output folder of launch/studies/scaling.sh (launch/scripts/output_dir.sh)
