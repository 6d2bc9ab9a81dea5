"""The Gradio dashboard: one module per tab, assembled by `workbench.ui.app.build_app`."""
