"""The dataset: Arrow schemas, the journaled Parquet writer, recovery, and the reader."""
