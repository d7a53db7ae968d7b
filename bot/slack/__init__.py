"""The Slack side of the bot: listeners, Block Kit rendering, modals and the services they call.

Listeners (``listeners``, ``interactions``, ``commands``) stay thin: they parse the request, call a
service (``diagnoser``, ``verdicts``, ``permissions``, ``uploads``) and render with ``blocks`` /
``modals``. Nothing here is imported by ``engine`` or ``kb``.
"""
