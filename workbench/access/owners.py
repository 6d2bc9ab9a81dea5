"""Who may see and control a run on a shared dashboard: the run's owner and the admins.

A run records the signed-in user who launched it as `owner` in its
status.json. A `Viewer` is the person asking (Gradio's `request.username`
and their account's role):

- an open dashboard (no accounts, served on loopback only) has no users:
  its viewer is `OPEN`, who sees and controls every run, as before accounts;
- a signed-in user sees and controls the runs they own;
- an admin sees and controls every run, including runs with no owner
  (started from the CLI, a notebook, or before the dashboard had accounts).

The rule is applied on every event server-side, not only by leaving other
users' runs out of the lists: an id sent by a crafted request is refused the
same way. Pure standard library.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Viewer:
    """The person an event comes from: `name` None on an open dashboard (no accounts)."""

    name: str | None
    admin: bool = False

    @property
    def open(self) -> bool:
        return self.name is None


OPEN = Viewer(None)
# A request without a known account on a dashboard that has accounts: sees nothing.
NOBODY = Viewer("", admin=False)


def may_see(viewer: Viewer, owner: str | None) -> bool:
    """True when `viewer` may see a run owned by `owner` (None: a run without a recorded owner)."""
    return viewer.open or viewer.admin or (bool(owner) and owner == viewer.name)


def may_control(viewer: Viewer, owner: str | None) -> bool:
    """True when `viewer` may stop, resume, delete or sample a run owned by `owner`.

    Today the same people who may see it; kept apart so the two rules can part
    (say, a class that may read each other's runs but not stop them).
    """
    return may_see(viewer, owner)


def viewer_for(name: str | None, users: dict) -> Viewer:
    """The viewer for a signed-in `name` given the accounts (`users`: name -> access.users.User).

    No accounts: an open dashboard, `OPEN`. With accounts, a name that is not
    one of them (no sign-in reached this request) is `NOBODY`.
    """
    if not users:
        return OPEN
    user = users.get(name) if isinstance(name, str) else None
    if user is None:
        return NOBODY
    return Viewer(user.name, admin=user.is_admin)
