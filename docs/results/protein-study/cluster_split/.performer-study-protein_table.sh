output folder of launch/studies/protein_table.sh (launch/scripts/output_dir.sh)
