output folder of launch/studies/prepare_scale.sh (launch/studies/output_dir.sh)
