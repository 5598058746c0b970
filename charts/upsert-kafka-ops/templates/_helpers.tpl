{{/* Names and labels shared by every template. */}}
{{- define "uko.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "uko.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "uko.selectorLabels" -}}
app.kubernetes.io/name: {{ include "uko.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "uko.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "uko.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "uko.serviceAccountName" -}}
{{- default (printf "%s-spark" (include "uko.fullname" .)) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "uko.kafkaSecretName" -}}
{{- default (printf "%s-kafka" (include "uko.fullname" .)) .Values.kafka.existingSecret -}}
{{- end -}}

{{- define "uko.objectStorageSecretName" -}}
{{- default (printf "%s-object-storage" (include "uko.fullname" .)) .Values.objectStorage.existingSecret -}}
{{- end -}}

{{- define "uko.image" -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}

{{/* Environment of the orchestrator's pods and of the exporter: non-secret values from the env
ConfigMap, the SASL credentials from the Kafka Secret, the S3 keys and an Iceberg catalog's password
from the object-storage Secret. */}}
{{- define "uko.kafkaEnv" -}}
- name: UKO_KAFKA_USERNAME
  valueFrom:
    secretKeyRef: {name: {{ include "uko.kafkaSecretName" . }}, key: {{ .Values.kafka.secretKeys.username }}, optional: true}
- name: UKO_KAFKA_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ include "uko.kafkaSecretName" . }}, key: {{ .Values.kafka.secretKeys.password }}, optional: true}
- name: UKO_S3_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef: {name: {{ include "uko.objectStorageSecretName" . }}, key: {{ .Values.objectStorage.secretKeys.accessKeyId }}, optional: true}
- name: UKO_S3_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef: {name: {{ include "uko.objectStorageSecretName" . }}, key: {{ .Values.objectStorage.secretKeys.secretAccessKey }}, optional: true}
- name: UKO_ICEBERG_CATALOG_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ include "uko.objectStorageSecretName" . }}, key: {{ .Values.objectStorage.secretKeys.icebergCatalogPassword }}, optional: true}
{{- end -}}

{{/* The Spark Connect server's token Secret (generated, or sparkConnect.auth.existingSecret) and key. */}}
{{- define "uko.sparkConnectTokenSecretName" -}}
{{- default (printf "%s-spark-connect-token" (include "uko.fullname" .)) .Values.sparkConnect.auth.existingSecret -}}
{{- end -}}

{{- define "uko.sparkConnectTokenSecretKey" -}}
{{- if .Values.sparkConnect.auth.existingSecret -}}
{{- .Values.sparkConnect.auth.existingSecretKey -}}
{{- else -}}
token
{{- end -}}
{{- end -}}

{{/* The TLS Secret the Spark Connect proxy serves: sparkConnect.tls.secretName, or cert-manager's. */}}
{{- define "uko.sparkConnectTlsSecretName" -}}
{{- if .Values.sparkConnect.tls.certManager.enabled -}}
{{- printf "%s-spark-connect-tls" (include "uko.fullname" .) -}}
{{- else -}}
{{- .Values.sparkConnect.tls.secretName -}}
{{- end -}}
{{- end -}}

{{/* With a k8s:// master, the driver ports of the Spark Connect server (sparkConnect.conf's, else
spark.driverService's) and the labels its executors get (the NetworkPolicy admits them). */}}
{{- define "uko.sparkConnectDriverPort" -}}
{{- index .Values.sparkConnect.conf "spark.driver.port" | default .Values.spark.driverService.port -}}
{{- end -}}

{{- define "uko.sparkConnectBlockManagerPort" -}}
{{- index .Values.sparkConnect.conf "spark.driver.blockManager.port" | default .Values.spark.driverService.blockManagerPort -}}
{{- end -}}

{{- define "uko.sparkConnectExecutorLabels" -}}
{{ include "uko.selectorLabels" . }}
app.kubernetes.io/component: spark-connect-executor
{{- end -}}
