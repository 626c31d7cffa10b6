output folder of launch/studies/prepare_scale.sh (launch/scripts/output_dir.sh)
