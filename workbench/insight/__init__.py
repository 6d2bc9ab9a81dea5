"""Reading a run: pure functions from run-folder records to figures, groups and health notes.

- `figures`  plotly figure dicts for reward, KL, loss, lengths and the rest
- `groups`   completions regrouped by prompt, with their rewards and advantages
- `health`   alarms in plain words (no learning signal, KL spikes, truncation)

No gradio and no torch: the dashboard, the notebooks and reports share them.
"""
