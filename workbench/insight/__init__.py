"""Reading a run: pure functions from run-folder records to figures, groups and health notes.

- `metric_frames`  a run's metric records as a table, one row per step
- `figure_drawing`  the plotly template and the blocks every figure is drawn with (lines, bands, notes)
- `figures`      plotly figure dicts for reward, KL, loss, lengths and the rest
- `overlay_figures`  several runs' metric on one figure, held-out accuracy over the training reward
- `groups`       completions regrouped by prompt, with their rewards and advantages
- `group_cards`  those groups as HTML cards (the dashboard's and the report's)
- `health`       alarms in plain words (no learning signal, KL spikes, truncation)
- `resumed`      which records still count after a resume
- `report`       the whole run as one self-contained HTML file

No gradio and no torch: the dashboard, the notebooks and reports share them.
"""
