"""Timeline page: live hot migration and the strategies it competes with, on a device."""

from dashboard.views import frame
from dashboard.views.timeline import render

frame.page("Timeline")
render()
