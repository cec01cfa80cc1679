"""The PySpark pipeline (clients/pipeline) against real broker clusters, through spark-submit.

PySpark and the Spark Kafka connector are installed by deploy/spark/install.sh (the same script as
``make pipeline``) from the session fixture ``spark_jars``; the first run downloads them, later runs are
offline. Spark's own output goes to a log file per job, shown only when a job fails.
"""
