output folder of launch/studies/scaling_nodes.sh (launch/studies/output_dir.sh)
