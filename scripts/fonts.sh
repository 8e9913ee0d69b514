#!/usr/bin/env bash
# The fonts of the PDF tickets and name badges (the default of EVENT_PDF_FONTS), from Debian's
# packages, installed when one is missing. Without root or apt-get it only says what is missing:
# `manage.py check` (events.E005) then names the script no font covers.
set -euo pipefail
declare -A PACKAGE=(
  [/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf]=fonts-dejavu-core
  [/usr/share/fonts/truetype/noto/NotoSansArabic-Regular.ttf]=fonts-noto-core
  [/usr/share/fonts/truetype/wqy/wqy-microhei.ttc]=fonts-wqy-microhei
)
missing=()
for file in "${!PACKAGE[@]}"; do
  if [ ! -f "$file" ]; then missing+=("${PACKAGE[$file]}"); fi
done
if [ "${#missing[@]}" -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing the PDF fonts: ${missing[*]}"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >/dev/null
else
  echo "The PDF fonts are missing; install the Debian packages ${missing[*]} (or set EVENT_PDF_FONTS)." >&2
fi
