// The study progress page: poll the small JSON endpoint and update the bar and counts.
(function () {
  "use strict";
  const card = document.getElementById("progress-card");
  if (!card) return;
  const bar = document.getElementById("progress-bar");
  async function refresh() {
    try {
      const response = await fetch(card.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) return;
      const data = await response.json();
      card.querySelectorAll("[data-field]").forEach((el) => {
        if (el.dataset.field in data) el.textContent = String(data[el.dataset.field]);
      });
      bar.max = Math.max(1, data.judgements_needed);
      bar.value = data.judgements;
      card.dataset.updated = String(Date.now());
    } catch (error) {
      // Offline for a moment: the next poll tries again.
    }
  }
  setInterval(refresh, 4000);
})();
