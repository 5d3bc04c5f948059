"""The menus of seed part B: welcome, information submenu, back, exit, unknown choices."""

from __future__ import annotations

from tests.conftest import Gateway, new_phone, new_session_id

WELCOME = "CON Welcome to twinhub\n1. Know More\n2. Account Menu\n3. Language\n*. Exit"
KNOW_MORE = "CON Know More\n1. About\n2. Pricing\n3. Delivery\n0. Back\n*. Exit"


async def test_initial_dial_shows_welcome_menu(gateway: Gateway) -> None:
    reply = await gateway.say(new_session_id(), new_phone(), "")
    assert reply == WELCOME


async def test_first_option_shows_information_submenu(gateway: Gateway) -> None:
    session, phone = new_session_id(), new_phone()
    await gateway.say(session, phone, "")
    assert await gateway.say(session, phone, "1") == KNOW_MORE


async def test_each_information_screen_and_back(gateway: Gateway) -> None:
    for choice, title in (("1", "About"), ("2", "Pricing"), ("3", "Delivery")):
        session, phone = new_session_id(), new_phone()
        await gateway.say(session, phone, "")
        await gateway.say(session, phone, "1")
        screen = await gateway.say(session, phone, f"1*{choice}")
        assert screen.startswith(f"CON {title}\n")
        assert screen.endswith("\n0. Back\n*. Exit")
        assert await gateway.say(session, phone, f"1*{choice}*0") == KNOW_MORE
        assert await gateway.say(session, phone, f"1*{choice}*0*0") == WELCOME


async def test_exit_ends_session_from_every_menu_level(gateway: Gateway) -> None:
    for path in ("", "1", "1*2", "2", "2*2"):
        session, phone = new_session_id(), new_phone()
        await gateway.say(session, phone, "")
        typed = ""
        for answer in path.split("*") if path else []:
            typed = f"{typed}*{answer}" if typed else answer
            await gateway.say(session, phone, typed)
        exit_text = f"{typed}**" if typed else "*"
        reply = await gateway.say(session, phone, exit_text)
        assert reply == "END Thank you for using twinhub. Goodbye.", path


async def test_unknown_choice_reshows_menu_with_notice(gateway: Gateway) -> None:
    session, phone = new_session_id(), new_phone()
    await gateway.say(session, phone, "")
    reply = await gateway.say(session, phone, "7")
    assert reply == "CON Invalid choice.\n" + WELCOME[4:]
    reply = await gateway.say(session, phone, "7*1")
    assert reply == KNOW_MORE
    reply = await gateway.say(session, phone, "7*1*9")
    assert reply == "CON Invalid choice.\n" + KNOW_MORE[4:]


async def test_shortcut_dial_walks_from_the_welcome_menu(gateway: Gateway) -> None:
    session, phone = new_session_id(), new_phone()
    reply = await gateway.say(session, phone, "1*2")
    assert reply.startswith("CON Pricing\n")
    assert await gateway.say(session, phone, "1*2*0") == KNOW_MORE
