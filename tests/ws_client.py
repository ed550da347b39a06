"""A Streamlit session over the websocket, as a browser tab speaks it: shared by bench/ and the deployment test.

The client sends the same protobuf messages as the browser (BackMsg rerun_script with the widget states the
browser would send) and reads the ForwardMsg deltas back, so the server does exactly the work it does for
a browser. asyncio + `websockets` (a Streamlit dependency); loopback addresses only.
"""

from __future__ import annotations

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

import exercises
from exercises.cli import selftest
from ui.answer_grid import cell_key
from ui.practice_state import answer_prefix

FINISHED_OK = (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)


class Session:
    """One browser tab's worth of Streamlit session, over the websocket.

    `cookie`: the Cookie header a browser would send (e.g. a load balancer's sticky-routing cookie);
    `headers`: more headers of the upgrade request (e.g. those a TLS-terminating proxy adds)."""

    def __init__(self, url: str, query: str, page: str = "practice", cookie: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        self.ws_url = url.replace("http://", "ws://") + "/_stcore/stream"
        self.origin = url
        self.query = query
        self.page = page
        self.cookie = cookie
        self.headers = dict(headers or {})
        self.widgets: dict[str, str] = {}  # widget key → widget id (text boxes)
        self.buttons: dict[str, str] = {}  # label → widget id ("submit" for the form's submit button)
        self.fragments: dict[str, str] = {}  # widget id → the id of the st.fragment that drew it
        self.page_hash = ""
        self.socket = None

    async def connect(self) -> None:
        headers = {"Origin": self.origin, **self.headers}
        if self.cookie:
            headers["Cookie"] = self.cookie
        self.socket = await websockets.connect(self.ws_url, subprotocols=["streamlit"], max_size=2**24,
                                               additional_headers=headers, open_timeout=30)

    async def run(self, states: list | None = None) -> tuple[bool, list[ForwardMsg]]:
        """Send one rerun (as the browser does), read until its script_finished; (ok, messages).
        A widget drawn by an st.fragment reruns that fragment alone, as in the browser: the rerun
        names the fragment, and its end is FINISHED_FRAGMENT_RUN_SUCCESSFULLY."""
        back = BackMsg()
        client = back.rerun_script
        client.query_string = self.query
        fragment = next((self.fragments[s.id] for s in states or [] if s.id in self.fragments), "")
        if fragment:
            client.fragment_id = fragment
        if self.page_hash:
            client.page_script_hash = self.page_hash
        else:
            client.page_name = self.page
        client.context_info.timezone = "UTC"
        client.context_info.locale = "en-US"
        client.context_info.url = f"{self.origin}/{self.page}"
        client.widget_states.SetInParent()
        for state in states or []:
            client.widget_states.widgets.append(state)
        await self.socket.send(back.SerializeToString())
        messages = []
        while True:
            message = ForwardMsg()
            message.ParseFromString(await self.socket.recv())
            messages.append(message)
            kind = message.WhichOneof("type")
            if kind == "navigation" and message.navigation.page_script_hash:
                self.page_hash = message.navigation.page_script_hash
            elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                self._remember(message.delta.new_element, message.delta.fragment_id)
            elif kind == "script_finished":
                if message.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    continue
                return message.script_finished in FINISHED_OK, messages

    def _remember(self, element, fragment_id: str = "") -> None:
        which = element.WhichOneof("type")
        if which in ("text_input", "text_area"):
            widget = getattr(element, which)
            self.widgets[widget.id.split("-", 2)[-1]] = widget.id  # $$ID-<hash>-<key>
        elif which == "button":
            widget = element.button
            self.buttons["submit" if widget.is_form_submitter else widget.label] = widget.id
        else:
            return
        if fragment_id:
            self.fragments[widget.id] = fragment_id
        else:
            self.fragments.pop(widget.id, None)

    def typed(self, texts: dict[str, str]) -> list:
        """Widget states for text typed into the boxes with these keys."""
        return [WidgetState(id=self.widgets[key], string_value=text) for key, text in texts.items()]

    def press(self, label: str) -> WidgetState:
        """The widget state of a click on the button `label` ("submit": the form's submit button)."""
        return WidgetState(id=self.buttons[label], trigger_value=True)


def answer_texts(ex: exercises.Exercise, wrong: bool, prefix: str | None = None) -> dict[str, str]:
    """Every answer cell's text by widget key: the right answer, or with its first cell wrong.

    `prefix`: the answer grid's key prefix (Practice's answer_prefix(ex) by default)."""
    prefix, texts = prefix or answer_prefix(ex), {}
    for part in ex.parts:
        if part.is_choice:
            continue
        for i, row in enumerate(part.reference):
            for j, x in enumerate(row):
                texts[cell_key(prefix, part.name, i, j)] = selftest.format_cell(x)
    if wrong:
        texts[next(iter(texts))] = "9"
    return texts


async def open_root(url: str, cookie: str | None = None) -> None:
    """One session on the app's root page. A fresh server whose first visitor arrives on /practice runs
    that page alone, as a legacy app_pages/ app (no app.py frame): this makes the measured sessions run the
    whole app, as they would on a server that has seen any visitor on its root page."""
    session = Session(url, "", page="", cookie=cookie)
    await session.connect()
    try:
        await session.run()
    finally:
        await session.socket.close()


def elements(messages: list[ForwardMsg]) -> list:
    """The new elements drawn in these messages, in order."""
    return [m.delta.new_element for m in messages
            if m.WhichOneof("type") == "delta" and m.delta.WhichOneof("type") == "new_element"]


def page_problems(messages: list[ForwardMsg]) -> tuple[bool, bool]:
    """(an exception element was drawn, a feedback alert was drawn)."""
    kinds = [element.WhichOneof("type") for element in elements(messages)]
    return "exception" in kinds, "alert" in kinds
