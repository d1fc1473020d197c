{{/*
Names are fixed, not prefixed by the release: one gpushare per cluster (one ledger), and
kubectl inspect gpushare, the admission policies and the RBAC rules find the components by
these names.
*/}}

{{/* Labels of every object: gpushare.labels (dict "ctx" $ "name" "<component>") */}}
{{- define "gpushare.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: gpushare
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- end }}

{{/* Selector labels: gpushare.selector "<component>" */}}
{{- define "gpushare.selector" -}}
app.kubernetes.io/name: {{ . }}
{{- end }}

{{/* Image reference: gpushare.image (dict "ctx" $ "repository" "...") */}}
{{- define "gpushare.image" -}}
{{- $tag := .ctx.Values.image.tag | default .ctx.Chart.AppVersion -}}
{{- if eq $tag "latest" -}}{{- fail "image.tag: \"latest\" is refused; name a release (e.g. v0.1.0)" -}}{{- end -}}
{{- printf "%s%s:%s" .ctx.Values.image.registry .repository $tag -}}
{{- end }}

{{/* The service account user name of a component: gpushare.saUser (dict "ctx" $ "name" "...") */}}
{{- define "gpushare.saUser" -}}
system:serviceaccount:{{ .ctx.Release.Namespace }}:{{ .name }}
{{- end }}

{{/* Whether cert-manager issues the extender's certificates: "true" or "". */}}
{{- define "gpushare.certManager" -}}
{{- $src := .Values.extender.tls.source -}}
{{- if eq $src "cert-manager" -}}true
{{- else if and (eq $src "auto") (.Capabilities.APIVersions.Has "cert-manager.io/v1") -}}true
{{- end -}}
{{- end }}

{{/* The URL prefix kube-scheduler calls. */}}
{{- define "gpushare.extenderURL" -}}
{{- if .Values.extender.url -}}
{{- .Values.extender.url -}}
{{- else if .Values.extender.hostNetwork -}}
https://127.0.0.1:{{ .Values.extender.port }}/gpushare-scheduler
{{- else -}}
https://gpushare-extender.{{ .Release.Namespace }}.svc:{{ .Values.extender.port }}/gpushare-scheduler
{{- end -}}
{{- end }}

{{/* DNS names and IPs of the extender's serving certificate, one per line. */}}
{{- define "gpushare.extenderSANs" -}}
gpushare-extender
gpushare-extender.{{ .Release.Namespace }}
gpushare-extender.{{ .Release.Namespace }}.svc
gpushare-extender.{{ .Release.Namespace }}.svc.cluster.local
{{- if .Values.extender.hostNetwork }}
127.0.0.1
localhost
{{- end }}
{{- range .Values.extender.tls.extraSANs }}
{{ . }}
{{- end }}
{{- end }}

{{/* The MutatingAdmissionPolicy API version. */}}
{{- define "gpushare.mapAPIVersion" -}}
{{- $v := .Values.scheduler.setSchedulerName.apiVersion -}}
{{- if eq $v "auto" -}}
{{- if semverCompare ">=1.36.0-0" .Capabilities.KubeVersion.Version -}}v1{{- else -}}v1beta1{{- end -}}
{{- else -}}{{ $v }}{{- end -}}
{{- end }}

{{/* Checks of values that the schema cannot express. */}}
{{- define "gpushare.validate" -}}
{{- if and (eq .Values.topology "extender") .Values.extender.hostNetwork (gt (int .Values.extender.replicas) 1) -}}
{{- fail "extender.hostNetwork: each kube-scheduler calls the extender on its own host, which may not be the elected replica; set extender.replicas=1 or use the Service (hostNetwork=false)" -}}
{{- end -}}
{{- end }}

{{/*
gpushare.writesCDI is non-empty when share-plugin writes CDI specs into sharePlugin.cdiSpecDir
on the host, the folder the runtime reads: with cdi-allocation, one spec per container it
serves; with simulated GPUs and cdi-cri (or cdi-allocation), the simulated cards' spec and files.
*/}}
{{- define "gpushare.writesCDI" -}}
{{- $s := .Values.sharePlugin.deviceListStrategy }}
{{- if or (eq $s "cdi-allocation") (and .Values.sharePlugin.simulate (eq $s "cdi-cri")) }}true{{ end }}
{{- end }}
