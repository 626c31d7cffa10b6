output folder of launch/studies/scaling_nodes.sh (launch/scripts/output_dir.sh)
