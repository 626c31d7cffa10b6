output folder of launch/studies/protein_table.sh (launch/studies/output_dir.sh)
