// spark_exporter as a monitoring mixin (github.com/monitoring-mixins/docs):
// prometheusAlerts, prometheusRules and grafanaDashboards for kube-prometheus
// and other jsonnet deployments.
//
// Nothing here is a second copy: the rules are rules/spark.rules.yml and the
// dashboards dashboards/*.json, read as shipped, with _config applied. With
// the default _config the output is those files unchanged
// (tools/dashboards/mixin_test.go checks it with go-jsonnet).
//
//   local spark = (import 'spark_exporter/mixin.libsonnet') + {
//     _config+:: { sparkSelector: 'job="spark-exporter"' },
//   };
local rules = std.parseYaml(importstr 'rules/spark.rules.yml');
local dashboards = {
  'spark.json': std.parseJson(importstr 'dashboards/spark.json'),
  'fleet.json': std.parseJson(importstr 'dashboards/fleet.json'),
};

// The record whose base_url label every alert's runbook_url starts with.
local runbooksRecord = 'spark:runbooks:info';

local isIdent(c) = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == ':';

// withSelector adds the matchers sel (`job="spark"`) to every selector of a
// metric the exporter exports (spark_*) in the PromQL expr; recorded names
// (level:spark_…:op) keep the labels of the series they were recorded from,
// and text inside quotes is left alone. jsonnet has no regular expressions,
// so this walks the expression once.
local withSelector(expr, sel) =
  if sel == '' then expr else
    local n = std.length(expr);
    local identEnd(i) = if i < n && isIdent(expr[i]) then identEnd(i + 1) else i;
    local spaceEnd(i) = if i < n && std.member(' \t\n', expr[i]) then spaceEnd(i + 1) else i;
    // Each step builds a plain object from strings already evaluated:
    // an object extended step by step (st { out+: c }) would leave a chain
    // of lazy fields as long as the expression, past jsonnet's stack.
    local state(out, skip, quoted) =
      if std.length(out) >= 0 then { out: out, skip: skip, quoted: quoted } else error 'unreachable';
    local done = std.foldl(
      function(st, i)
        if i < st.skip then st
        else
          local c = expr[i];
          if st.quoted then state(st.out + c, st.skip, !(c == '"' && expr[i - 1] != '\\'))
          else if c == '"' then state(st.out + c, st.skip, true)
          else if std.substr(expr, i, 6) == 'spark_' && (i == 0 || !isIdent(expr[i - 1])) then
            local j = identEnd(i);
            local k = spaceEnd(j);
            if k < n && expr[k] == '{' then
              local empty = spaceEnd(k + 1) < n && expr[spaceEnd(k + 1)] == '}';
              state(st.out + std.substr(expr, i, j - i) + '{' + sel + (if empty then '' else ', '), k + 1, false)
            else
              state(st.out + std.substr(expr, i, j - i) + '{' + sel + '}', j, false)
          else state(st.out + c, st.skip, false),
      std.range(0, n - 1),
      state('', 0, false),
    );
    done.out;

// A dashboard's PromQL is in targets' and annotations' expr and in the
// instance variable's definition and query.
local dashboardWithSelector(v, sel) =
  if std.isObject(v) then {
    [k]:
      if std.member(['expr', 'definition', 'query'], k) && std.isString(v[k]) then withSelector(v[k], sel)
      else dashboardWithSelector(v[k], sel)
    for k in std.objectFields(v)
  }
  else if std.isArray(v) then [dashboardWithSelector(x, sel) for x in v]
  else v;

local isAlert(r) = std.objectHas(r, 'alert');

// The usable-memory tiers: SparkPoolUsableLow and SparkPoolUsableCritical
// are `spark_pool_usable_bytes < N * 1024^3` in the shipped rules, and
// _config's poolUsableLowGiB and poolUsableCriticalGiB replace N. Their
// defaults are read from the rules, so there is no second copy.
local tierPrefix = 'spark_pool_usable_bytes < ';
local tierSuffix = ' * 1024^3';
local tierKeys = { SparkPoolUsableLow: 'poolUsableLowGiB', SparkPoolUsableCritical: 'poolUsableCriticalGiB' };
local tierExpr(r) =
  local e = std.stripChars(r.expr, ' \n');
  assert std.startsWith(e, tierPrefix) && std.endsWith(e, tierSuffix) :
         'mixin.libsonnet: %s is no longer "%sN%s"' % [r.alert, tierPrefix, tierSuffix];
  std.parseJson(std.substr(e, std.length(tierPrefix), std.length(e) - std.length(tierPrefix) - std.length(tierSuffix)));
local shippedTier(name) = [tierExpr(r) for g in rules.groups for r in g.rules if std.get(r, 'alert') == name][0];
local withTier(r, config) =
  if std.objectHas(tierKeys, std.get(r, 'alert', '')) then
    r { expr: tierPrefix + std.toString(config[tierKeys[r.alert]]) + tierSuffix }
  else r;

{
  _config+:: {
    // Matchers added to every selector of a spark_* metric, in the rules
    // and the dashboards, e.g. 'job="spark-exporter"'. Empty: every series
    // of those names, as the shipped files have it.
    sparkSelector: '',

    // Where alerts' runbook_url points: a copy of docs/runbooks.md (wiki,
    // intranet). Each alert appends its anchor (#sparkgputhrottling).
    runbookURL: [r for g in rules.groups for r in g.rules if std.get(r, 'record') == runbooksRecord][0].labels.base_url,

    // Usable memory (MemAvailable - CmaFree) in GiB under which
    // SparkPoolUsableLow (warning) and SparkPoolUsableCritical (critical)
    // fire; the shipped tiers are internal/judge's, from an owner's
    // measured trail before a kill (docs/design.md).
    poolUsableLowGiB: shippedTier('SparkPoolUsableLow'),
    poolUsableCriticalGiB: shippedTier('SparkPoolUsableCritical'),
  },

  local config = self._config,

  local groups = [
    g {
      rules: [
        withTier(r, config) { expr: withSelector(super.expr, config.sparkSelector) }
        + (if std.get(r, 'record') == runbooksRecord then { labels+: { base_url: config.runbookURL } } else {})
        for r in g.rules
      ],
    }
    for g in rules.groups
  ],

  // A group with an alert goes whole into prometheusAlerts: the recording
  // rules it reads stay in its group, evaluated before it as in the shipped
  // file. Groups of recording rules only are prometheusRules.
  prometheusAlerts+:: {
    groups+: [g for g in groups if std.length(std.filter(isAlert, g.rules)) > 0],
  },

  prometheusRules+:: {
    groups+: [g for g in groups if std.length(std.filter(isAlert, g.rules)) == 0],
  },

  grafanaDashboards+:: {
    [name]: dashboardWithSelector(dashboards[name], config.sparkSelector)
    for name in std.objectFields(dashboards)
  },
}
