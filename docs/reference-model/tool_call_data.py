#!/usr/bin/python3
"""Tool-call data for the reference model: the three tools of tools.json, many phrasings and
many values, with values and phrasings held out of training.

Writes into OUT_DIR (deterministic for a seed):
  train.jsonl              official fine-tuning JSONL (query, tools, answers)
  heldout-values.jsonl     training phrasings, values never used in training
  heldout-phrasings.jsonl  phrasings never used in training, values never used in training
  pretrain/NN.txt          the training examples as conversations for pre-training: each
                           opens as the official template renders an example (v2.0.12, no
                           system, no reasoning) and goes on for 0-6 more user/assistant
                           turns, so that most of the text is queries and calls rather than
                           the repeated tool declarations; files under 1 MiB (the corpus
                           reader's limit), each a training document of the corpus split

Held-out values are chosen by a hash of the value, so they do not depend on list order.
Training rows are dressed (openings, closings, case) and half their cities and package names
are built for the row, so values must be copied from the query rather than memorised.
Usage: /usr/bin/python3 tool_call_data.py OUT_DIR [--train N] [--heldout N] [--seed S]"""
import argparse, hashlib, json, os, random, stat, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

CITIES = """Paris Berlin Oslo Lima Tokyo Cairo Dublin Madrid Quito Perth Vienna Lagos Seoul Austin
Zurich Nairobi Helsinki Stockholm Copenhagen Warsaw Prague Budapest Lisbon Porto Seville Valencia
Milan Naples Turin Rome Athens Sofia Bucharest Belgrade Zagreb Ljubljana Bratislava Krakow Gdansk
Riga Tallinn Vilnius Minsk Kyiv Odesa Tbilisi Yerevan Baku Ankara Izmir Beirut Amman Doha Dubai
Muscat Riyadh Tehran Kabul Karachi Lahore Delhi Mumbai Chennai Kolkata Pune Jaipur Dhaka Colombo
Kathmandu Hanoi Bangkok Manila Jakarta Surabaya Singapore Taipei Osaka Kyoto Nagoya Sapporo Busan
Beijing Shanghai Wuhan Chengdu Shenzhen Tianjin Harbin Ulaanbaatar Almaty Tashkent Bishkek Dushanbe
Sydney Melbourne Brisbane Adelaide Hobart Darwin Auckland Wellington Christchurch Suva Apia Honolulu
Anchorage Seattle Portland Denver Phoenix Dallas Houston Chicago Detroit Boston Atlanta Miami Orlando
Toronto Montreal Ottawa Calgary Vancouver Winnipeg Halifax Quebec Havana Kingston Panama Bogota
Medellin Caracas Santiago Valparaiso Montevideo Asuncion Cusco Recife Salvador Fortaleza Manaus
Brasilia Curitiba Accra Dakar Abuja Kano Kinshasa Luanda Lusaka Harare Maputo Durban Windhoek
Gaborone Kampala Kigali Mombasa Addis Khartoum Tunis Algiers Rabat Casablanca Marrakesh Tripoli
Reykjavik Bergen Tromso Uppsala Malmo Aarhus Hamburg Munich Cologne Frankfurt Leipzig Dresden Bremen
Stuttgart Antwerp Ghent Brussels Utrecht Rotterdam Amsterdam Luxembourg Geneva Basel Bern Lyon
Marseille Nice Bordeaux Lille Nantes Toulouse Glasgow Edinburgh Cardiff Belfast Leeds Bristol
Liverpool Manchester London Cork Galway""".split() + [
    "New York", "Los Angeles", "San Francisco", "Buenos Aires", "Rio de Janeiro", "Sao Paulo",
    "Mexico City", "Cape Town", "Hong Kong", "Kuala Lumpur", "Tel Aviv", "Abu Dhabi", "Ho Chi Minh City",
    "Las Vegas", "San Diego", "New Delhi", "St Petersburg", "La Paz", "Santo Domingo", "Port Louis"]

PACKAGES = """zstd cmake groff openssl python3 gcc vim curl bash coreutils tar gzip make git sed grep
gawk findutils diffutils patch less nano emacs tmux screen htop rsync wget openssh-client
openssh-server nginx apache2 lighttpd postgresql mariadb-server sqlite3 redis-server memcached
docker.io podman qemu-system-x86 libvirt-daemon virt-manager gdb valgrind strace ltrace perf
clang llvm lld ninja-build meson autoconf automake libtool pkg-config bison flex m4 dpkg-dev
debhelper devscripts lintian build-essential fakeroot sudo systemd udev dbus network-manager
iproute2 iptables nftables tcpdump nmap netcat-openbsd dnsutils whois traceroute iputils-ping
ffmpeg imagemagick gimp inkscape blender audacity vlc mpv pulseaudio pipewire alsa-utils
firefox-esr chromium thunderbird libreoffice evince okular zathura texlive latexmk pandoc
graphviz gnuplot octave r-base julia golang-go rustc cargo nodejs npm ruby perl php lua5.4
openjdk-17-jdk maven gradle ant scala ghc ocaml erlang elixir libzstd-dev libssl-dev zlib1g-dev
libxml2-dev libcurl4-openssl-dev libffi-dev libsqlite3-dev libpng-dev libjpeg-dev libgtest-dev
libabsl-dev libboost-dev libeigen3-dev libopenblas-dev liblapack-dev libfftw3-dev libhdf5-dev
libyaml-dev libjson-c-dev libsystemd-dev libudev-dev libusb-1.0-0-dev libpcap-dev
python3-numpy python3-scipy python3-pandas python3-torch python3-requests python3-yaml
python3-pytest python3-venv python3-pip ipython3 jupyter-notebook shellcheck pylint black
clang-format clang-tidy cppcheck doxygen sphinx-doc hugo jekyll certbot fail2ban ufw apparmor
cron anacron logrotate rsyslog chrony ntpsec smartmontools lvm2 mdadm cryptsetup btrfs-progs
xfsprogs e2fsprogs dosfstools ntfs-3g parted gparted testdisk p7zip-full unzip zip xz-utils
bzip2 lz4 brotli jq yq ripgrep fd-find fzf bat tree ncdu mc ranger""".split()

SYLLABLES = "ka lo mi ra ven tor sel bar din fu gor ham lin mar nor pel quin ros sul tan vor wel zan ber".split()

WEATHER_TRAIN = [
    "What is the weather in {}?", "How warm is it in {} today?", "Weather for {} please",
    "Is it raining in {}?", "What's the weather like in {}?", "weather in {}", "Tell me the weather in {}",
    "Do I need an umbrella in {}?", "How cold is it in {} right now?", "Check the weather for {}",
    "Is it sunny in {} today?", "What's the forecast for {}?", "Give me the current weather in {}.",
    "Any snow in {} today?", "{} weather", "I'm flying to {}, what's the weather there?",
    "What temperature is it in {}?", "Can you look up the weather in {}?", "Is it windy in {}?",
    "Current conditions in {}?", "How is the weather over in {}?", "weather {} now",
    "Will it rain in {} today?", "What's the temperature in {}?", "Is it hot in {}?",
    "Forecast {}", "How humid is it in {}?", "Is it foggy in {} this morning?",
    "Weather report for {}", "Get the weather in {}", "Look up the weather for {}",
    "Is it snowing in {}?", "What are the conditions like in {}?", "Will I need sunglasses in {}?",
    "How many degrees is it in {}?", "Is it stormy in {}?", "I'm in {}, is it going to rain?",
    "Temperature in {}", "{}: weather?", "Could you check the weather in {} for me?",
    "My sister lives in {}. How is the weather there?", "Show the weather for {}",
    "Is it nice out in {}?", "What's the weather doing in {}?", "Is it freezing in {}?",
    "Do you know the weather in {}?", "Tell me how the weather is in {}",
]
WEATHER_HELDOUT = [
    "Should I bring a jacket in {}?", "Report the weather conditions for {}.",
    "What's it like outside in {} at the moment?", "I wonder how hot it is in {}",
    "Please fetch {}'s weather.", "Is the sky clear over {}?",
]
TIMER_TRAIN = [
    "Set a timer for {} minutes", "Start a {} minute timer", "Remind me in {} minutes",
    "Timer: {} minutes", "Set a {}-minute timer please", "Count down {} minutes",
    "timer {} min", "Wake me up in {} minutes", "Can you start a timer for {} minutes?",
    "I need a timer of {} minutes", "Give me {} minutes on the clock", "Start timing {} minutes",
    "Alert me after {} minutes", "{} minute timer", "Put a timer on for {} minutes.",
    "Set an alarm to go off in {} minutes", "Time {} minutes for the pasta", "Start the countdown: {} minutes",
    "Timer for {} minutes", "Please set a timer of {} minutes", "Make a timer for {} minutes",
    "Can I get a {} minute timer?", "{} minutes timer please", "Set timer {} minutes",
    "Remind me in {} minutes to check the oven", "Start a countdown for {} minutes",
    "Tell me when {} minutes have gone by", "Set a timer, {} minutes", "I want a {}-minute countdown",
    "Buzz me in {} minutes", "Create a timer for {} minutes", "Countdown of {} minutes please",
    "Notify me in {} minutes", "Give me a {} minute reminder", "The tea needs {} minutes, set a timer",
    "Start a timer: {} min", "Could you set a {} minute timer?", "Set the timer to {} minutes",
    "Timer please, {} minutes", "Start {} minutes on the timer", "Go off in {} minutes",
]
TIMER_HELDOUT = [
    "Ping me once {} minutes have passed.", "Let me know when {} minutes are up",
    "Begin a countdown of {} minutes.", "Could you time {} minutes for me?",
    "In {} minutes, ring.", "Run a timer lasting {} minutes",
]
PACKAGE_TRAIN = [
    "Find the package {}", "Which Debian package is {}?", "Look up {} in Debian", "Show me the {} package",
    "Search for the {} package", "Is {} packaged in Debian?", "package {}", "Find {} in the archive",
    "What is the Debian package {}?", "Can you look up the package {}?", "Tell me about the {} package",
    "I need the {} package", "Get details on package {}", "Where do I get {} on Debian?",
    "Look up the Debian package called {}.", "find package {}", "Query the package {}",
    "Do we have {} in Debian?",
    "Is there a Debian package named {}?", "Search Debian for {}", "Look for the package {}",
    "Can I install {} on Debian?", "Is {} available in Debian?", "Find me {} in the Debian archive",
    "What version of {} does Debian have?", "Details of the {} package please", "Lookup package {}",
    "Does Debian ship {}?", "package info {}", "Show package {}", "Which version of {} is in Debian?",
    "I want to install {}, is it in Debian?", "Check the Debian archive for {}", "Search packages for {}",
    "Find the Debian package named {}", "Is {} in the Debian archive?", "What does the {} package contain?",
    "Look up {} for me", "Debian package {}", "Tell me about {} in Debian", "apt package {}",
    "Get me the package {}", "Has Debian got {}?",
]
PACKAGE_HELDOUT = [
    "Give me information on the Debian package {}.", "Which package provides {}?",
    "Check whether {} exists as a Debian package", "I'm looking for {} in the repositories",
    "Pull up the package entry for {}", "Is there a {} package I can install?",
]
OTHER_TRAIN = [
    "Tell me a joke", "Who wrote the GPL?", "Thanks, that is all", "What does free software mean?",
    "Hello there", "How are you today?", "What is the capital of France?", "Translate hello into German",
    "Write a short poem about the sea", "What is two plus two?", "Explain what a compiler does",
    "Good night", "What time zone is Tokyo in?", "Who are you?", "Summarize the MIT license",
    "Recommend a good book", "What is a kernel?", "Say something nice", "How do I boil an egg?",
    "What does the BSD license allow?", "Never mind", "Can you sing?", "What is the speed of light?",
    "Explain recursion", "How many legs does a spider have?", "What year is it?",
    "Hi", "Thank you!", "Bye", "Good morning", "Cool, thanks", "That's all for now", "See you later",
    "Great job", "Sorry, wrong question", "Can you help me?", "What can you do?", "Are you a robot?",
    "Stop", "Cancel that", "Nothing else", "What is love?", "Tell me a story", "Write a haiku",
    "Who won the last world cup?", "What is the meaning of life?", "Do you like music?",
    "Count to ten", "Spell the word apple", "What is the square root of 81?", "Name three colours",
    "What's up?", "Nice to meet you", "How old are you?", "Where do you live?", "What's your name?",
    "Tell me something interesting", "I'm bored", "Let's chat", "Do you dream?", "Make me laugh",
    "What is the biggest animal?", "How far away is the moon?", "Who painted the Mona Lisa?",
    "What is the tallest mountain?", "How do plants grow?", "Give me a riddle", "What rhymes with orange?",
    "Is the earth round?", "How many days are in a year?", "Why is the sky blue?", "Can you keep a secret?",
    "You are funny", "What should I cook tonight?", "Suggest a name for my cat", "How do I learn to code?",
    "Recommend a movie", "No thanks", "Yes please", "Maybe later", "I don't know", "Whatever", "Ok",
    # Requests no declared tool serves, some naming a city or a number: [] all the same.
    "Book a flight to Paris", "Play the song Yesterday", "Call Anna", "Send a message to Tom",
    "Turn on the lights", "Order a pizza", "Add milk to my shopping list", "Open the garage door",
    "Read my emails", "Take a photo", "Show me a map of Berlin", "Translate 20 words into Spanish",
    "How many people live in London?", "What is 15 times 4?",
]
# Off-topic questions built from a pattern and a subject: many answers of [] in many forms.
OTHER_PATTERNS = ["What is {}?", "Tell me about {}", "Explain {} to me", "Why does {} matter?",
                  "Define {}", "Give me a fact about {}", "I'd like to learn about {}",
                  "Write a sentence about {}", "What do you think of {}?", "Is {} interesting?",
                  "How does {} work?", "Can you tell me about {}?", "Say something about {}",
                  "What's special about {}?", "Teach me about {}", "Write a poem about {}",
                  "Do you know anything about {}?", "Any thoughts on {}?", "Give me a summary of {}",
                  "What's the history of {}?", "Share a fun fact about {}", "I'm curious about {}",
                  "Help me understand {}", "Talk to me about {}"]
OTHER_SUBJECTS = ["the moon", "the internet", "a volcano", "a linked list", "free software", "the GPL",
                  "a compiler", "a hash table", "the ocean", "the Roman empire", "the stock market",
                  "a black hole", "a sonnet", "the piano", "a database"] + \
    "photosynthesis gravity democracy jazz chess poetry algebra coffee football bees vaccines friendship Linux encryption sleep dinosaurs".split() + \
    ["the sun", "rainbows", "a bridge", "a guitar", "mathematics", "history", "the human brain", "electricity",
     "trains", "the French revolution", "prime numbers", "the alphabet", "cats", "dogs", "the Olympics",
     "robots", "a spreadsheet", "the printing press", "the Nile", "Shakespeare", "origami", "yoga",
     "a rainforest", "quantum physics", "the immune system", "bread"]
OTHER_TRAIN = OTHER_TRAIN + [p.format(x) for p in OTHER_PATTERNS for x in OTHER_SUBJECTS]
# Training queries are also dressed: an opening, a closing, or the first letter in lower case.
OPENINGS = ["Hey, ", "Hi, ", "Please ", "Quick question: ", "Hello! ", "OK, ", "Excuse me, ",
            "Assistant, ", "So, ", "Um, "]
CLOSINGS = [" please", ", thanks", ", thank you", " right now", " now", "!", " asap", " for me"]

OTHER_HELDOUT = [
    "Describe the colour blue", "Who invented the telephone?", "Okay, thank you very much",
    "What is your favourite food?", "Explain how a bicycle works", "Is a tomato a fruit?",
]


def hash_key(text, hex_digits):
    """The first hex digits of the SHA-256 of `text`, as a number."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:hex_digits], 16)


def is_heldout(value, modulus):
    """A value is held out by the hash of its text: independent of list order."""
    return hash_key(str(value), 8) % modulus == 0


def synthetic_name(rng, capital):
    w = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3)))
    return w.capitalize() if capital else w


def synthetic_package(rng):
    return (rng.choice(["lib", "", "python3-", "golang-"]) + synthetic_name(rng, False) +
            rng.choice(["", "-dev", "-utils", "2", "-tools", ""]))


def fresh_value(rng, kind):
    """A newly built city or package name that is not held out: with names of the moment,
    no small list of training values can be memorised, so a model must copy from the query."""
    while True:
        v = synthetic_name(rng, True) if kind == "weather" else synthetic_package(rng)
        if not is_heldout(v, 6):
            return v


def values(rng):
    """(train, heldout) lists of cities, packages and minutes."""
    cities = list(CITIES) + [synthetic_name(rng, True) for _ in range(300)]
    packages = list(PACKAGES) + [synthetic_package(rng) for _ in range(300)]
    minutes = list(range(1, 241))
    split = lambda xs, m: ([x for x in xs if not is_heldout(x, m)], [x for x in xs if is_heldout(x, m)])
    return {"weather": split(sorted(set(cities)), 6), "timer": split(minutes, 6),
            "package": split(sorted(set(packages)), 6)}


def dress(rng, query, value):
    """Half the training queries as they are; the others with an opening, a closing (before
    the final punctuation), or both, or the first letter in lower case. The value is never
    touched."""
    choice = rng.randrange(8)
    if choice < 4:
        return query
    first_word = query.split(" ")[0]
    lower_ok = not (value is not None and query.startswith(str(value))) and \
        first_word not in ("I", "I'm", "I'd")
    if choice == 4:
        return query[0].lower() + query[1:] if lower_ok else query
    if choice in (5, 7):
        body = query.rstrip("?.!")
        end = query[len(body):]
        closing = rng.choice(CLOSINGS)
        query = body + closing + ("" if closing.endswith("!") else end)
    if choice in (6, 7):
        query = rng.choice(OPENINGS) + (query[0].lower() + query[1:] if lower_ok else query)
    return query


def example(rng, tools, kind, phrasings, vals, dressed, fresh=False):
    """One row of `kind`: a dressed query or not; with `fresh`, half its cities and package
    names are newly built (training rows only: a fresh value is never a held-out one)."""
    if kind == "other":
        q = rng.choice(phrasings["other"])
        return {"query": dress(rng, q, None) if dressed else q, "tools": tools, "answers": []}
    if fresh and kind != "timer" and rng.randrange(2):
        v = fresh_value(rng, kind)
    else:
        v = rng.choice(vals[kind])
    q = rng.choice(phrasings[kind]).format(v)
    if dressed:
        q = dress(rng, q, v)
    name, arg = {"weather": ("get_weather", "city"), "timer": ("set_timer", "minutes"),
                 "package": ("find_package", "name")}[kind]
    return {"query": q, "tools": tools, "answers": [{"name": name, "arguments": {arg: v}}]}


def dump(x):
    return json.dumps(x, separators=(",", ":"), ensure_ascii=False)


def conversation(examples):
    """The first example as the official render_example (v2.0.12, no system, no reasoning)
    gives prompt and target (<tool_call>answers</tool_call><|im_end|>); the others as further
    turns of the same conversation."""
    out = "<|im_start|>user\n<tools>" + dump(examples[0]["tools"]) + "</tools>\n"
    for i, ex in enumerate(examples):
        if i:
            out += "<|im_start|>user\n"
        out += (ex["query"] + "<|im_end|>\n<|im_start|>assistant\n<tool_call>" + dump(ex["answers"]) +
                "</tool_call><|im_end|>\n")
    return out


def held_out_by_corpus(text):
    """train/corpus.h holds a document out when its SHA-256's first 8 bytes are 0 mod 20."""
    return hash_key(text, 16) % 20 == 0


def write_atomically(path, text):
    """Readers never see a half-written file: write beside it, then rename over it. Anything
    but a regular file at `path` (a device, a directory, a link) is refused, never replaced."""
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        raise OSError("%s: exists and is not a regular file; not replaced" % path)
    # A new name of its own, so no file already beside `path` (say OUT.tmp) is overwritten.
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".",
                               prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp's 0600 would pass to the output
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        if os.path.lexists(tmp):
            os.remove(tmp)
        raise


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=8000)
    ap.add_argument("--heldout", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    with open(os.path.join(HERE, "tools.json")) as f:
        tools = json.load(f)
    rng = random.Random(a.seed)
    vals = values(rng)
    train_vals = {k: v[0] for k, v in vals.items()}
    held_vals = {k: v[1] for k, v in vals.items()}
    train_p = {"weather": WEATHER_TRAIN, "timer": TIMER_TRAIN, "package": PACKAGE_TRAIN, "other": OTHER_TRAIN}
    held_p = {"weather": WEATHER_HELDOUT, "timer": TIMER_HELDOUT, "package": PACKAGE_HELDOUT,
              "other": OTHER_HELDOUT}
    # Two off-topic rows in eleven: refusals in many forms, so a model refuses what it never saw.
    kinds = ["weather", "timer", "package"] * 3 + ["other"] * 2
    sets = {
        "train.jsonl": [example(rng, tools, rng.choice(kinds), train_p, train_vals, True, True)
                        for _ in range(a.train)],
        "heldout-values.jsonl": [example(rng, tools, rng.choice(kinds), train_p, held_vals, True)
                                 for _ in range(a.heldout)],
        "heldout-phrasings.jsonl": [example(rng, tools, rng.choice(kinds), held_p, held_vals, False)
                                    for _ in range(a.heldout)],
    }
    os.makedirs(os.path.join(a.out, "pretrain"), exist_ok=True)
    for name, rows in sets.items():
        write_atomically(os.path.join(a.out, name),
                         "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    rows, convs = sets["train.jsonl"], []
    while rows:
        k = 1 + rng.randint(0, 6)
        convs.append(conversation(rows[:k]))
        rows = rows[k:]
    # A shard ends past 900 kB, and only where the corpus split keeps it for training; the
    # last one grows by further training examples until the split keeps it.
    shard, n = "", 0
    while convs or shard:
        shard += convs.pop(0) if convs else conversation(
            [example(rng, tools, rng.choice(kinds), train_p, train_vals, True, True)])
        if (len(shard.encode()) > 900_000 or not convs) and not held_out_by_corpus(shard):
            write_atomically(os.path.join(a.out, "pretrain", "%02d.txt" % n), shard)
            shard, n = "", n + 1
    for k in ("weather", "timer", "package"):
        print("%s: %d training values, %d held out" % (k, len(train_vals[k]), len(held_vals[k])))
    print("wrote %d training examples (%d pretraining shards), %d + %d held out" %
          (a.train, n, a.heldout, a.heldout))


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        print("tool_call_data: %s" % e, file=sys.stderr)
        sys.exit(2)
