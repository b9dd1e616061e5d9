module github.com/spark-exporter/spark_exporter/tools/dashboards

go 1.26.0

require github.com/grafana/grafana-foundation-sdk/go v0.0.22

require github.com/spark-exporter/spark_exporter v0.0.0

replace github.com/spark-exporter/spark_exporter => ../..
