"""Static files (jsPsych plugins, runner, dashboard assets), shipped as package data."""
