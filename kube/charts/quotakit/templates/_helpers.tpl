{{/*
Hand-written helpers of the generated templates (zz_generated.*).
*/}}

{{/*
quotakit.clusterQuotas is "true" where ClusterQuotas are kept: with
clusterQuotas, and always with the webhook, which enforces them
(kube/deploy/webhook includes the component cluster-quotas).
*/}}
{{- define "quotakit.clusterQuotas" -}}
{{- if or .Values.clusterQuotas .Values.webhook.enabled }}true{{ end -}}
{{- end }}

{{/*
quotakit.controlPlaneFrom is the webhook NetworkPolicy's "from" with
callerTrust network-policy: one ipBlock for each of controlPlaneCIDRs.
kube/deploy ships an address no control plane has and tells you to patch
it; the chart refuses to render without yours instead.
*/}}
{{- define "quotakit.controlPlaneFrom" -}}
{{- if not .Values.webhook.controlPlaneCIDRs }}
{{- fail "webhook.controlPlaneCIDRs: with callerTrust network-policy, list the addresses your control plane calls webhooks from (kube/README.md, \"Who may call the webhook\")" }}
{{- end }}
{{- $from := list }}
{{- range .Values.webhook.controlPlaneCIDRs }}
{{- $from = append $from (dict "ipBlock" (dict "cidr" .)) }}
{{- end }}
{{- toYaml $from }}
{{- end }}

{{/*
quotakit.allowedGroups is the CEL list of guardNamespaceLabels.allowedGroups,
the policy's variable allowedGroups.
*/}}
{{- define "quotakit.allowedGroups" -}}
[{{ range $i, $g := .Values.guardNamespaceLabels.allowedGroups }}
{{- if regexMatch "['\\\\]" $g }}{{ fail (printf "guardNamespaceLabels.allowedGroups: %q: a group name with a quote or a backslash cannot be written into the policy" $g) }}{{ end }}
{{- if $i }}, {{ end }}'{{ $g }}'
{{- end }}]
{{- end }}
