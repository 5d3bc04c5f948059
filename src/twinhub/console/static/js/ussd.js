// The phone simulator: keeps the session's answers and sends the accumulated text, as a
// telecom gateway does, through the console (which forwards to the USSD gateway).
const dial = document.getElementById("dial");
const reply = document.getElementById("reply");
const screen = document.getElementById("screen");
const answer = document.getElementById("answer");
const send = document.getElementById("send");
let session = null;

function randomId() {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return "console-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function exchange() {
  const response = await fetch(dial.dataset.send, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": dial.dataset.csrf },
    body: JSON.stringify({ sessionId: session.id, serviceCode: session.code, phoneNumber: session.phone, text: session.inputs.join("*") }),
  });
  let text;
  try {
    text = (await response.json()).reply;
  } catch {
    text = "END The console could not reach the gateway.";
  }
  const open = text.startsWith("CON ");
  screen.textContent = text.replace(/^(CON|END) /, "");
  screen.dataset.state = open ? "open" : "ended";
  answer.disabled = send.disabled = !open;
  if (open) answer.focus();
  else session = null;
}

dial.addEventListener("submit", async (event) => {
  event.preventDefault();
  session = { id: randomId(), phone: dial.phone.value.trim(), code: dial.code.value.trim(), inputs: [] };
  screen.textContent = "Dialling…";
  await exchange();
});

reply.addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!session) return;
  session.inputs.push(answer.value.trim());
  answer.value = "";
  await exchange();
});

for (const key of document.querySelectorAll("[data-key]")) {
  key.addEventListener("click", () => {
    if (!answer.disabled) {
      answer.value += key.dataset.key;
      answer.focus();
    }
  });
}
