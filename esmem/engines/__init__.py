"""Engines to run locally: the embedded OpenSearch node (open or secured) and its jar lock."""
