"""Overview page: what is in the model (inputs, outputs, ops, sizes, Netron)."""

from dashboard.views import frame
from dashboard.views.overview import render

frame.page("Overview")
render()
