"""The sign-in card on a real pending sign-in: a link that opens a tab, a paste field that keeps nothing."""

from __future__ import annotations

from urllib.parse import urlencode

from jupyter_fsbroker.protocol.auth import SignIn, SignInError
from jupyter_fsbroker.widgets.sign_in_card import SignInCard, link_html

STATE = "st-Q1vF"


def pending(server: str = "hosted", issuer: str = "https://as.example.com") -> SignIn:
    query = urlencode({"client_id": "c1", "state": STATE, "redirect_uri": "http://127.0.0.1:5/callback"})
    return SignIn(
        server=server,
        url="https://mcp.example.com/mcp",
        issuer=issuer,
        resource="https://mcp.example.com/mcp",
        authorization_url=f"https://as.example.com/authorize?{query}",
        receiver="loopback",
    )


def answer_with(sign_in: SignIn) -> tuple[list[str], object]:
    seen: list[str] = []

    def answer(address: str) -> tuple[bool, str]:
        seen.append(address)
        try:
            sign_in.complete(address)
        except SignInError as exc:
            return False, f"Not accepted: {exc}."
        return True, "Signing in."

    return seen, answer


def test_the_link_opens_the_authorization_page_in_a_new_tab_and_escapes_what_servers_chose() -> None:
    sign_in = pending(server="<b>x</b>")
    html = link_html(sign_in)
    assert html.startswith('<a class="fsbroker-signin-open')
    assert 'target="_blank" rel="noopener"' in html
    assert 'href="https://as.example.com/authorize?client_id=c1&amp;state=st-Q1vF&amp;' in html
    assert "Sign in to &lt;b&gt;x&lt;/b&gt; (https://as.example.com)</a>" in html


def test_a_refused_paste_is_said_and_cleared_and_the_right_one_completes_the_sign_in() -> None:
    sign_in = pending()
    seen, answer = answer_with(sign_in)
    card = SignInCard(sign_in, answer)  # type: ignore[arg-type]
    assert card._dom_classes == ("fsbroker-signin",)
    assert "fsbroker-signin-paste" in card.paste._dom_classes
    assert "fsbroker-signin-status" in card.status._dom_classes
    assert "Waiting for the sign-in" in card.status.value
    card.paste.value = "http://127.0.0.1:5/callback?code=c-1&state=tampered"
    card.submit.click()
    assert card.paste.value == "" and len(seen) == 1
    assert "state mismatch" in card.status.value and sign_in.state == "waiting"
    assert "Not accepted" in repr(card)
    card.paste.value = f"?code=c-1&state={STATE}"
    card.submit.click()
    assert card.paste.value == "" and sign_in.answered
    assert "Not accepted" not in card.status.value and "Signing in" in card.status.value
    sign_in.finish()  # the tokens arrived: the card says so, and offers nothing more
    assert card.status.value == "Signed in to https://as.example.com."
    assert card.link.layout.display == "none" and card.form.layout.display == "none"
    card.close()
    sign_in.fail("failed")  # ended already, and the card no longer follows it
    assert sign_in.state == "completed"


def test_a_failed_sign_in_says_why_in_words() -> None:
    sign_in = pending()
    card = SignInCard(sign_in, answer_with(sign_in)[1])  # type: ignore[arg-type]
    sign_in.fail("timed_out")
    assert card.status.value == "Signing in to hosted failed: nobody completed it in time."
    card.close()
