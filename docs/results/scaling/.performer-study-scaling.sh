output folder of launch/studies/scaling.sh (launch/studies/output_dir.sh)
