output folder of launch/studies/streams.sh (launch/scripts/output_dir.sh)
