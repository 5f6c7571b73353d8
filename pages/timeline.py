"""Timeline page: live hot migration and the strategies it competes with, on a device."""

from dashboard.views.timeline import render

render()
