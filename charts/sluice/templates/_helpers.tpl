{{/* The chart's name, truncated to a DNS label. */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: objects are named after it. */}}
{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "sluice.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ include "sluice.chart" . }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The PersistentVolumeClaim of the state volume (stateStore bbolt). */}}
{{- define "sluice.stateClaim" -}}
{{- default (printf "%s-state" (include "sluice.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{- define "sluice.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Checks that need more than one value (the schema checks single values).
*/}}
{{- define "sluice.validate" -}}
{{- if not .Values.git.repo }}
{{- fail "git.repo is required: the repository sluice follows" }}
{{- end }}
{{- if and (not .Values.api.existingSecret) (not .Values.api.insecure) }}
{{- fail "api.existingSecret is required (a Secret with key \"token\"): the HTTP API listens on the pod IP; set api.insecure=true to serve it without a token" }}
{{- end }}
{{- if and (not .Values.xds.tls.existingSecret) (not .Values.xds.insecure) }}
{{- fail "xds.tls.existingSecret is required (a Secret with keys tls.crt, tls.key and ca.crt, e.g. from a cert-manager Certificate): xDS listens on the pod IP, where anyone who reaches the port would read every rollout's routes and could NACK them to hold a canary, and sluice refuses xDS beyond loopback without mutual TLS; set xds.insecure=true to serve it in plaintext anyway" }}
{{- end }}
{{- if and .Values.xds.tls.existingSecret .Values.xds.insecure }}
{{- fail "xds.tls.existingSecret and xds.insecure exclude each other: give the Secret for mutual TLS, or insecure for plaintext" }}
{{- end }}
{{- if and .Values.api.existingReadSecret (not .Values.api.existingSecret) }}
{{- fail "api.existingReadSecret needs api.existingSecret: reads cannot need a token while commands need none" }}
{{- end }}
{{- if eq .Values.stateStore "bbolt" }}
{{- if gt (int .Values.replicaCount) 1 }}
{{- fail "stateStore bbolt keeps state in one pod: set replicaCount to 1, or use stateStore kubernetes" }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
{{- fail "stateStore bbolt cannot be used with leader election: a new leader would find no record of the rollouts in its own empty store and take an in-flight canary's version as new (sluice run refuses --leader-elect without --state-store kubernetes); set leaderElection.enabled=false, or use stateStore kubernetes" }}
{{- end }}
{{- if and .Values.persistence.existingClaim .Values.persistence.create }}
{{- fail "persistence.existingClaim and persistence.create exclude each other: name an existing claim, or let the chart create one" }}
{{- end }}
{{- if not (or .Values.persistence.existingClaim .Values.persistence.create) }}
{{- fail "stateStore bbolt needs a PersistentVolumeClaim for its state: on an emptyDir a restarted pod has no record of its rollouts and would take an in-flight canary's version as new; set persistence.existingClaim to a claim in the release's namespace, or persistence.create=true (with persistence.storageClass, \"\" for the cluster's default class, and persistence.size), or use stateStore kubernetes" }}
{{- end }}
{{- end }}
{{- if and (ne .Values.git.auth.type "none") (not .Values.git.auth.existingSecret) }}
{{- fail (printf "git.auth.existingSecret is required with git.auth.type %s" .Values.git.auth.type) }}
{{- end }}
{{- if and (eq .Values.git.auth.type "basic") (not .Values.git.auth.username) }}
{{- fail "git.auth.username is required with git.auth.type basic" }}
{{- end }}
{{- if and .Values.alerts.secretKeys (not .Values.alerts.existingSecret) }}
{{- fail "alerts.existingSecret is required with alerts.secretKeys" }}
{{- end }}
{{- end }}
