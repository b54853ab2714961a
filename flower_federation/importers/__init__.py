"""Importers: a values file of Flower's SuperNode Helm chart (`import helm`) or
flower-operator `Federation` CRs (`import operator`) as stack settings files.

Layout: chart.py (the chart's parameters and where each goes: the one mapping table),
helm.py (reading a values file as Helm would), helm_steps.py and helm_defaults.py (values
computed rather than copied; where our defaults differ), operator.py (CRs), common.py
(refusals, the stack being built, validating it), output.py (the Pulumi.<stack>.yaml
text); the command is cli/import_command.py."""
