{{/*
Shared definitions. Object names are fixed (they are the contract the controller, the issuer,
the CLI and the kube-apiserver rely on); only the labels carry the release.
*/}}

{{/* The one namespace Ichor runs in. */}}
{{- define "ichor.namespace" -}}ichor-system{{- end -}}

{{/* The namespace holding one credentials Secret per user and nothing else. `ichor init`
creates it, never the chart, so no `helm uninstall` deletes a password; the chart renders only
the issuer's and the controller's Roles into it (users on) and the policy guarding it. */}}
{{- define "ichor.credentialsNamespace" -}}ichor-credentials{{- end -}}

{{/* Refuses a release outside ichor-system, and checks the users settings. Included by every
template that renders a namespaced object, so `helm template` fails as `helm install` does. */}}
{{- define "ichor.checks" -}}
{{- if ne .Release.Namespace (include "ichor.namespace" .) -}}
{{- fail (printf "Ichor installs into the namespace ichor-system only (its object names are a contract), not %q: use `helm install ichor helm/ichor -n ichor-system --create-namespace`" .Release.Namespace) -}}
{{- end -}}
{{- $u := .Values.ichorUI.users -}}
{{- if $u.enabled -}}
{{- if not $u.externalURL -}}
{{- fail "ichorUI.users.externalURL is required when ichorUI.users.enabled is true: the issuer's public https URL, e.g. https://ichor.example.com" -}}
{{- end -}}
{{- if not (hasPrefix "https://" $u.externalURL) -}}
{{- fail (printf "ichorUI.users.externalURL %q must use https (the issuer of a kube-apiserver must be https)" $u.externalURL) -}}
{{- end -}}
{{- /* Users on render Roles into the credentials namespace, which only `ichor init` creates.
Against a cluster (install, upgrade, --dry-run=server) a missing namespace fails the render with
the command to run, before Helm creates anything. Without a cluster (`helm template`, lint)
`lookup` answers an empty map for everything, kube-system included, which every cluster has:
then nothing can be known and nothing is checked. */ -}}
{{- if and (lookup "v1" "Namespace" "" "kube-system") (not (lookup "v1" "Namespace" "" (include "ichor.credentialsNamespace" .))) -}}
{{- fail (printf "the namespace %s, which holds one credentials Secret per user and which the chart renders the issuer's and the controller's Roles into, does not exist; create it with `ichor init --ui-url %s --cluster <TalosCluster name>` (it creates the namespace, then runs this upgrade), then run this command again" (include "ichor.credentialsNamespace" .) $u.externalURL) -}}
{{- end -}}
{{- end -}}
{{- $o := .Values.ichorUI.oidc -}}
{{- if $o.enabled -}}
{{- if not $u.enabled -}}
{{- fail "ichorUI.oidc.enabled needs ichorUI.users.enabled: the issuer serves the UI and the API the external provider signs in to" -}}
{{- end -}}
{{- if not (hasPrefix "https://" $o.issuerURL) -}}
{{- fail (printf "ichorUI.oidc.issuerURL %q must be the provider's https issuer URL" $o.issuerURL) -}}
{{- end -}}
{{- if not $o.clientID -}}
{{- fail "ichorUI.oidc.clientID is required when ichorUI.oidc.enabled is true: the OAuth client registered at the provider for Ichor's UI" -}}
{{- end -}}
{{- if or (not $o.kubeClientID) (eq $o.kubeClientID $o.clientID) -}}
{{- fail "ichorUI.oidc.kubeClientID is required when ichorUI.oidc.enabled is true, and must be another client than clientID: the client the kube-apiserver trusts for the provider (kubeconfigs sign in as it); were it the UI's client, a token a browser signed in with would be a kubectl credential too" -}}
{{- end -}}
{{- if eq (trimSuffix "/" $o.issuerURL) (trimSuffix "/" $u.externalURL) -}}
{{- fail "ichorUI.oidc.issuerURL is Ichor's own issuer (ichorUI.users.externalURL); give the site's provider" -}}
{{- end -}}
{{- range list $o.usernamePrefix $o.groupsPrefix -}}
{{- if or (not .) (hasPrefix "ichor:" .) (hasPrefix "system:" .) (hasPrefix . "ichor:") (hasPrefix . "system:") -}}
{{- fail (printf "ichorUI.oidc prefix %q is not allowed: not empty, and no name made of it may start with ichor: or system: (not under them, not the beginning of them such as ichor or sys)" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* Checked with users off too: the controller's key timeline reads them either way. */ -}}
{{- $ttl := include "ichor.seconds" $u.tokenTTL | atoi -}}
{{- if or (lt $ttl 60) (gt $ttl 900) -}}
{{- fail (printf "ichorUI.users.tokenTTL %q is out of range; it must be from 1m to 15m" $u.tokenTTL) -}}
{{- end -}}
{{- $life := include "ichor.seconds" $u.refreshLifetime | atoi -}}
{{- if or (lt $life 3600) (gt $life 2592000) -}}
{{- fail (printf "ichorUI.users.refreshLifetime %q is out of range; it must be from 1h to 720h" $u.refreshLifetime) -}}
{{- end -}}
{{- end -}}

{{/* The issuer Service's type: ichorUI.service.type, ClusterIP when unset (a release upgraded
with --reuse-values keeps the values of a chart that had no such key). */}}
{{- define "ichor.serviceType" -}}
{{- $t := default "ClusterIP" (.Values.ichorUI.service).type -}}
{{- if not (has $t (list "ClusterIP" "NodePort" "LoadBalancer")) -}}
{{- fail (printf "ichorUI.service.type %q is not allowed: ClusterIP, NodePort or LoadBalancer (every one keeps the ClusterIP the kube-apiserver fetches discovery from)" $t) -}}
{{- end -}}
{{- $t -}}
{{- end -}}

{{/* The issuer's --family-writes-per-minute: issuer.familyWritesPerMinute, an integer from 0
to 1200, or the issuer's default 6 when unset (a release upgraded with --reuse-values keeps the
values of a chart that had no such key; `default` would turn 0, which turns the caps off, into
6). */}}
{{- define "ichor.familyWritesPerMinute" -}}
{{- $n := 6 -}}
{{- if and (hasKey .Values.issuer "familyWritesPerMinute") (not (kindIs "invalid" .Values.issuer.familyWritesPerMinute)) -}}
{{- $n = .Values.issuer.familyWritesPerMinute -}}
{{- end -}}
{{- $s := toString $n -}}
{{- if or (not (regexMatch "^[0-9]{1,4}$" $s)) (gt (atoi $s) 1200) -}}
{{- fail (printf "issuer.familyWritesPerMinute %q is out of range; it must be an integer from 0 (no cap, for benchmarks) to 1200" $s) -}}
{{- end -}}
{{- $s -}}
{{- end -}}

{{/* A duration of one unit (90s, 5m, 12h) in seconds; anything else is 0 (out of range). */}}
{{- define "ichor.seconds" -}}
{{- $d := toString . -}}
{{- if regexMatch "^[0-9]+[smh]$" $d -}}
{{- $n := regexFind "^[0-9]+" $d | atoi -}}
{{- $unit := regexFind "[smh]$" $d -}}
{{- if eq $unit "s" -}}{{ $n }}{{- else if eq $unit "m" -}}{{ mul $n 60 }}{{- else -}}{{ mul $n 3600 }}{{- end -}}
{{- else -}}0{{- end -}}
{{- end -}}

{{/* Labels every object of the chart carries. Argument: dict "ctx" . "component" name. */}}
{{- define "ichor.labels" -}}
app.kubernetes.io/name: ichor
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: ichor
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Pod selector labels: stable across releases (a Deployment's selector is immutable). */}}
{{- define "ichor.selectorLabels" -}}
app.kubernetes.io/name: ichor
app.kubernetes.io/component: {{ . }}
{{- end -}}

{{/* An image reference. Argument: dict "ctx" . "image" .Values.x.image. */}}
{{- define "ichor.image" -}}
{{- printf "%s:%s" .image.repository (default .ctx.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{/* The pod security context: non-root (distroless nonroot, 65532), RuntimeDefault seccomp,
and fsGroup so the 0440 Secret volumes are readable by the process. Not configurable. */}}
{{- define "ichor.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The container security context (the "restricted" Pod Security Standard). */}}
{{- define "ichor.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The soft anti-affinity used when .affinity is empty. Argument: component name. */}}
{{- define "ichor.softAntiAffinity" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "ichor.selectorLabels" . | nindent 12 }}
{{- end -}}
