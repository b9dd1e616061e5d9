module github.com/spark-exporter/spark_exporter/tools/dashboards

go 1.26.0

require github.com/grafana/grafana-foundation-sdk/go v0.0.22

require (
	github.com/google/go-jsonnet v0.22.0
	github.com/spark-exporter/spark_exporter v0.0.0
	go.yaml.in/yaml/v3 v3.0.6
)

require (
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	sigs.k8s.io/yaml v1.4.0 // indirect
)

replace github.com/spark-exporter/spark_exporter => ../..
