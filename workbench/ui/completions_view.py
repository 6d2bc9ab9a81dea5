"""The grouped-completions view the Train and Runs tabs share: the cards of `workbench.insight.group_cards`, each
opening into its token view (`workbench.insight.token_cards`).

The cards are built in insight/ so the run report (insight/report.py) draws
the same cards as the dashboard; the tabs import them from here.
"""

from workbench.insight.group_cards import STYLE, render_card, render_empty_html, render_group, render_groups_html
from workbench.insight.token_cards import step_token_views

__all__ = ["STYLE", "render_card", "render_empty_html", "render_group", "render_groups_html", "step_token_views"]
