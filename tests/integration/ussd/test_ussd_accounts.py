"""Accounts over USSD: create, log in, lockout after wrong PINs, change PIN, log out."""

from __future__ import annotations

import re

import pytest

from tests.conftest import Gateway, GatewayFactory, new_phone, running_registry
from tests.support.ussd_flows import Journey, create_account, log_in
from twinhub.services.customer_ids import new_customer_id

PIN = "58213"
MAIN_MENU = re.compile(
    r"^CON Hello \w+\n1\. My Account\n2\. Change PIN\n3\. Log Out\n"
    r"4\. My Stoves\n5\. My Claims\n6\. My Credits\n7\. Stove Status\n8\. Language\n\*\. Exit$"
)


async def test_create_account_gives_customer_id_and_main_menu(gateway: Gateway) -> None:
    phone = new_phone()
    journey = Journey(gateway, phone)
    await journey.dial()
    assert (await journey.send("2")).startswith("CON Account Menu\n1. Log In\n2. Create Account")
    assert (await journey.send("2")).startswith("CON Create Account\nEnter your full name")
    assert (await journey.send("  Amina   Otieno ")).startswith("CON Choose a 5-digit PIN")
    assert (await journey.send(PIN)).startswith("CON Enter the same PIN again")
    created = await journey.send(PIN)
    customer_id = re.search(r"customer ID is (\d{8})", created)
    assert customer_id, created
    menu = await journey.send("1")
    assert MAIN_MENU.match(menu) and menu.startswith("CON Hello Amina\n")
    details = await journey.send("1")
    assert "Amina Otieno" in details  # whitespace tidied
    assert f"ID: {customer_id.group(1)}" in details
    assert f"Phone: {phone}" in details


@pytest.mark.parametrize(
    ("name", "accepted"),
    [
        ("Jo", True),
        ("J", False),
        ("A" * 40, True),
        ("A" * 41, False),
        ("Mary-Jane O'Neil", True),
        ("Zoë Ñandú", True),
        ("John 3", False),
        ("<script>", False),
        ("", False),
    ],
)
async def test_full_name_rules(gateway: Gateway, name: str, accepted: bool) -> None:
    journey = Journey(gateway, new_phone())
    await journey.dial()
    await journey.send("2")
    await journey.send("2")
    reply = await journey.send(name)
    if accepted:
        assert reply.startswith("CON Choose a 5-digit PIN"), reply
    else:
        assert reply.startswith("CON Enter 2 to 40 letters.\nCreate Account"), reply


@pytest.mark.parametrize(
    ("pin", "notice"),
    [
        ("1234", "PIN must be 5 digits."),
        ("123456", "PIN must be 5 digits."),
        ("12a45", "PIN must be 5 digits."),
        ("11111", "PIN too easy."),
        ("12345", "PIN too easy."),
        ("98765", "PIN too easy."),
        ("12121", "PIN too easy."),
    ],
)
async def test_weak_or_malformed_pins_are_refused(gateway: Gateway, pin: str, notice: str) -> None:
    journey = Journey(gateway, new_phone())
    await journey.dial()
    for answer in ("2", "2", "Amina Otieno"):
        await journey.send(answer)
    reply = await journey.send(pin)
    assert reply.startswith(f"CON {notice}"), reply
    assert reply.endswith("Choose a 5-digit PIN\n0. Back\n*. Exit")


async def test_pin_equal_to_end_of_phone_number_is_refused(gateway: Gateway) -> None:
    phone = "+254700047391"
    journey = Journey(gateway, new_phone()[:-5] + "47391")
    await journey.dial()
    for answer in ("2", "2", "Amina Otieno"):
        await journey.send(answer)
    assert (await journey.send("47391")).startswith("CON PIN too easy."), phone


async def test_pin_confirmation_mismatch_asks_again(gateway: Gateway) -> None:
    journey = Journey(gateway, new_phone())
    await journey.dial()
    for answer in ("2", "2", "Amina Otieno", PIN):
        await journey.send(answer)
    reply = await journey.send("58214")
    assert reply.startswith("CON PINs did not match. Try again.\nChoose a 5-digit PIN")
    await journey.send("60719")
    assert "customer ID is" in await journey.send("60719")


async def test_back_from_pin_screen_returns_to_name(gateway: Gateway) -> None:
    journey = Journey(gateway, new_phone())
    await journey.dial()
    for answer in ("2", "2", "Amina Otieno"):
        await journey.send(answer)
    assert (await journey.send("0")).startswith("CON Create Account\nEnter your full name")


async def test_second_account_for_same_phone_is_refused(gateway: Gateway) -> None:
    phone = new_phone()
    await create_account(gateway, phone, "Amina Otieno", PIN)
    journey = Journey(gateway, phone)
    await journey.dial()
    await journey.send("2")
    reply = await journey.send("2")
    assert reply.startswith("CON This phone has an account. Log in.\nAccount Menu")


async def test_login_with_customer_id_and_pin(gateway: Gateway) -> None:
    phone = new_phone()
    customer_id = await create_account(gateway, phone, "Amina Otieno", PIN)
    _, reply = await log_in(gateway, phone, customer_id, PIN)
    assert MAIN_MENU.match(reply), reply


async def test_login_with_the_sessions_phone_number(gateway: Gateway) -> None:
    phone = new_phone()
    await create_account(gateway, phone, "Amina Otieno", PIN)
    journey = Journey(gateway, phone)
    await journey.dial()
    await journey.send("2")
    assert "1. Use this phone's account" in await journey.send("1")
    assert (await journey.send("1")).startswith("CON Enter your 5-digit PIN")
    assert MAIN_MENU.match(await journey.send(PIN))


async def test_login_with_phone_that_has_no_account(gateway: Gateway) -> None:
    journey = Journey(gateway, new_phone())
    await journey.dial()
    await journey.send("2")
    await journey.send("1")
    assert (await journey.send("1")).startswith("CON No account for this phone.\nLog In")


@pytest.mark.parametrize("typed", ["12345678", "1234", "abcdefgh", "123456789"])
async def test_malformed_customer_id_is_caught_before_lookup(gateway: Gateway, typed: str) -> None:
    journey = Journey(gateway, new_phone())
    await journey.dial()
    await journey.send("2")
    await journey.send("1")
    # 12345678 fails the Luhn check digit; the others are not 8 digits.
    assert (await journey.send(typed)).startswith("CON Check the customer ID and try again.")


async def test_unknown_id_and_wrong_pin_get_the_same_reply(gateway: Gateway) -> None:
    """Issue 15.5: a stranger cannot tell which customer IDs exist."""
    customer_id = await create_account(gateway, new_phone(), "Amina Otieno", PIN)
    stranger = new_phone()
    unknown = new_customer_id()  # well formed (check digit right), registered to nobody
    _, to_unknown = await log_in(gateway, stranger, unknown, "60719")
    _, to_real = await log_in(gateway, stranger, customer_id, "60719")
    assert to_unknown == to_real
    assert to_real.startswith("CON Wrong customer ID or PIN.\nEnter your 5-digit PIN")


async def test_a_stranger_cannot_lock_the_owner_out(make_gateway: GatewayFactory) -> None:
    """Guesses from other phones lock the account against other phones only, for a while;
    the owner's phone still logs in, and the guessing phone is itself locked in the end."""
    gateway = await make_gateway(ussd_phone_max_pin_attempts=5, ussd_lockout_seconds=60)
    owner = new_phone()
    customer_id = await create_account(gateway, owner, "Amina Otieno", PIN)
    stranger = new_phone()
    replies = [(await log_in(gateway, stranger, customer_id, "60719"))[1] for _ in range(4)]
    assert all(r.startswith("CON Wrong customer ID or PIN.") for r in replies), replies
    # Locked against strangers now: even the right PIN from another phone is refused, and
    # in the very words of a wrong one.
    _, right_pin = await log_in(gateway, new_phone(), customer_id, PIN)
    assert right_pin.startswith("CON Wrong customer ID or PIN.")
    _, owners = await log_in(gateway, owner, customer_id, PIN)
    assert MAIN_MENU.match(owners), owners
    _, fifth = await log_in(gateway, stranger, new_customer_id(), "60719")
    assert fifth.startswith("CON Wrong customer ID or PIN.")  # the phone's 5th: now locked
    _, sixth = await log_in(gateway, stranger, new_customer_id(), "60719")
    assert sixth.startswith("END Too many wrong PINs from this phone. Try again in 1 minute.")
    platform = gateway.app.state.platform
    keys = {lock.key for lock in await platform.customers.lockouts()}
    assert {f"account:{customer_id}", f"phone:{stranger}"} <= keys
    assert await platform.customers.unlock(stranger)
    _, lifted = await log_in(gateway, stranger, new_customer_id(), "60719")
    assert lifted.startswith("CON Wrong customer ID or PIN.")


async def test_three_wrong_pins_lock_the_account(gateway: Gateway) -> None:
    phone = new_phone()
    customer_id = await create_account(gateway, phone, "Amina Otieno", PIN)
    journey, reply = await log_in(gateway, phone, customer_id, "60719")
    assert reply.startswith("CON Wrong PIN. 2 attempts left.\nEnter your 5-digit PIN")
    assert (await journey.send("60718")).startswith("CON Wrong PIN. 1 attempt left.")
    locked = await journey.send("60717")
    assert locked.startswith("END Your account is locked for 1 minute after 3 wrong PINs.")
    # Even the right PIN in a new session is refused now, until the lock-out ends.
    _, again = await log_in(gateway, phone, customer_id, PIN)
    assert again.startswith("END Your account is locked for 1 minute")


async def test_right_pin_resets_the_wrong_pin_count(gateway: Gateway) -> None:
    phone = new_phone()
    customer_id = await create_account(gateway, phone, "Amina Otieno", PIN)
    for _ in range(2):
        journey, reply = await log_in(gateway, phone, customer_id, "60719")
        assert reply.startswith("CON Wrong PIN.")
        assert MAIN_MENU.match(await journey.send(PIN))
    _, reply = await log_in(gateway, phone, customer_id, "60719")
    assert reply.startswith("CON Wrong PIN. 2 attempts left.")


async def test_pin_of_wrong_shape_at_login_does_not_count(gateway: Gateway) -> None:
    phone = new_phone()
    customer_id = await create_account(gateway, phone, "Amina Otieno", PIN)
    journey, reply = await log_in(gateway, phone, customer_id, "12")
    assert reply.startswith("CON PIN must be 5 digits.")
    assert (await journey.send("60719")).startswith("CON Wrong PIN. 2 attempts left.")


async def test_change_pin(gateway: Gateway) -> None:
    phone = new_phone()
    customer_id = await create_account(gateway, phone, "Amina Otieno", PIN)
    journey, _ = await log_in(gateway, phone, customer_id, PIN)
    assert (await journey.send("2")).startswith("CON Change PIN\nEnter your current PIN")
    assert (await journey.send("60719")).startswith("CON Wrong PIN. 2 attempts left.")
    assert (await journey.send(PIN)).startswith("CON Enter a new 5-digit PIN")
    assert (await journey.send(PIN)).startswith("CON New PIN must differ from the old one.")
    assert (await journey.send("11111")).startswith("CON PIN too easy.")
    assert (await journey.send("73920")).startswith("CON Enter the new PIN again")
    assert (await journey.send("73921")).startswith("CON PINs did not match. Try again.")
    await journey.send("73920")
    assert (await journey.send("73920")).startswith("CON PIN changed.\nHello Amina")
    _, old = await log_in(gateway, phone, customer_id, PIN)
    assert old.startswith("CON Wrong PIN.")
    _, new = await log_in(gateway, phone, customer_id, "73920")
    assert MAIN_MENU.match(new)


async def test_log_out_ends_the_session(gateway: Gateway) -> None:
    phone = new_phone()
    customer_id = await create_account(gateway, phone, "Amina Otieno", PIN)
    journey, _ = await log_in(gateway, phone, customer_id, PIN)
    assert await journey.send("3") == "END You have logged out. Goodbye."
    assert await journey.send("1") == "END This session has ended. Please dial again."


async def test_wrong_input_on_every_account_screen_gets_a_notice(gateway: Gateway) -> None:
    """No screen of the account flows crashes or ends on an unexpected answer."""
    phone = new_phone()
    customer_id = await create_account(gateway, phone, "Amina Otieno", PIN)
    journey, _ = await log_in(gateway, phone, customer_id, PIN)
    expected = [
        ("9", "CON Invalid choice.\nHello Amina"),
        ("1", "CON My Account\n"),
        ("x", "CON Invalid choice.\nMy Account\n"),
        ("0", "CON Hello Amina"),
        ("2", "CON Change PIN\n"),
        ("abc", "CON PIN must be 5 digits.\nChange PIN"),
        ("0", "CON Hello Amina"),
    ]
    for step, prefix in expected:
        reply = await journey.send(step)
        assert reply.startswith(prefix), (step, reply)
    created = Journey(gateway, new_phone())
    await created.dial()
    for step, prefix in [
        ("2", "CON Account Menu"),
        ("5", "CON Invalid choice.\nAccount Menu"),
        ("1", "CON Log In"),
        ("hello", "CON Check the customer ID and try again."),
    ]:
        reply = await created.send(step)
        assert reply.startswith(prefix), (step, reply)


async def test_operator_sees_and_lifts_lockouts_through_the_registry(gateway: Gateway) -> None:
    phone = new_phone()
    customer_id = await create_account(gateway, phone, "Amina Otieno", PIN)
    journey, _ = await log_in(gateway, phone, customer_id, "60719")
    await journey.send("60718")
    assert (await journey.send("60717")).startswith("END Your account is locked")
    platform = gateway.app.state.platform
    async with running_registry(gateway.settings, platform) as registry:
        admin = registry.as_key(await registry.key("did:ixo:org/operator", "admin"))
        reader = registry.as_key(await registry.key("did:ixo:org/reader", "reader"))
        async with admin, reader:
            assert (await reader.get("/v1/admin/lockouts")).status_code == 403
            listed = (await admin.get("/v1/admin/lockouts")).json()["items"]
            assert f"own:{customer_id}" in {item["key"] for item in listed}
            assert (await admin.delete(f"/v1/admin/lockouts/{customer_id}")).status_code == 204
            assert (await admin.delete(f"/v1/admin/lockouts/{customer_id}")).status_code == 404
            assert (await admin.delete("/v1/admin/lockouts/not-an-id")).status_code == 422
    _, reply = await log_in(gateway, phone, customer_id, PIN)
    assert MAIN_MENU.match(reply), reply
