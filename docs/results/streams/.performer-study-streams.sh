output folder of launch/studies/streams.sh (launch/studies/output_dir.sh)
