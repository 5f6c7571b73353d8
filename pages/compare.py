"""Compare page: two models, or one model under two option sets, side by side."""

from dashboard.views import frame
from dashboard.views.compare import render

frame.page("Compare")
render()
