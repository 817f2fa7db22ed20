"""A workspace's members, managed by its owners on the workspace's Members page.

The rules (the last owner stays, every change audited) are the console's: these services check
that the caller owns the workspace and call `portal.console.services.set_member` and
`remove_member`, the same functions the operators' console uses."""
