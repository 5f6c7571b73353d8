"""Overview page: what is in the model (inputs, outputs, ops, sizes, Netron)."""

from dashboard.views.overview import render

render()
