"""Extraction: records (text) into facts ({key, value, assertion status, op hint}). Pure: no I/O."""
