"""Profile page: where the time goes, per node, on every backend (simulated HTP cycles here, µs on the CPU)."""

from dashboard.views import frame
from dashboard.views.profile import render

frame.page("Profile")
render()
