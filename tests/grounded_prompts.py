"""Prompts for speculative decoding, shared by the tests and bench/speculative_bench.py:
input-grounded tasks (summarise, extract, edit a document; edit code), whose answers repeat
their input and so suit n-gram drafting, and free chat, whose answers do not."""

DOCUMENT = """\
Annual report of the Millbrook Water Board, year ending 31 March.

1. Supply. The board supplied 4.2 million cubic metres of drinking water to 18,400 households \
and 612 businesses. Average daily demand was 11,500 cubic metres, with a peak of 16,900 cubic \
metres on 14 July during the heat wave. The Eastfield reservoir stood at 71 percent of capacity \
at the end of the year, compared with 64 percent a year earlier. The Northgate borehole was out \
of service from 2 September to 19 October while its pump was replaced.

2. Quality. The laboratory took 9,812 samples across the network. Of these, 9,797 met every \
standard. Eleven samples showed raised turbidity after the storm of 3 November, and four samples \
from the Hillside district showed low chlorine levels in January. In every case the board flushed \
the affected mains and resampled within 48 hours, and all follow-up samples passed.

3. Leakage. Leakage fell from 19.3 percent of supply to 16.8 percent. The repair crews fixed \
1,204 leaks, of which 311 were found by the new acoustic loggers installed on the Riverside and \
Old Town trunk mains. The board aims to bring leakage below 15 percent within two years by \
extending the loggers to the Westbury and Hillside districts.

4. Works. The replacement of the cast-iron main under Station Road was finished in June, two \
weeks ahead of plan, at a cost of 1.9 million pounds. Work on the new treatment stage at the \
Eastfield plant began in October; it will remove the taste and odour problems reported each \
summer and is due to finish in May of next year. The board also replaced 2,350 lead service \
pipes, leaving about 4,100 still to be replaced.

5. Customers. The board received 1,486 complaints, down from 1,733. Most concerned low pressure \
(512), discoloured water (398) and billing (301). The average time to answer a complaint fell \
from 6.1 days to 4.3 days. A new online account service was opened in February and 5,920 \
households registered in its first six weeks.

6. Finance. Income was 14.6 million pounds and operating costs were 11.2 million pounds. \
Capital spending was 5.4 million pounds, funded by 3.1 million pounds from reserves and a loan \
of 2.3 million pounds from the regional development fund. Charges will rise by 3.5 percent from \
1 April, below the rate of inflation.

7. Staff. The board employed 143 people at the end of the year. Six apprentices joined the \
repair crews, and two senior engineers retired after more than thirty years of service: \
Margaret Ellison, who led the Station Road project, and David Okafor, who designed the leakage \
logger network.

8. Environment. The board abstracted 38 percent of its water from the River Mill and the rest from groundwater. River abstraction was reduced for 23 days in August to protect summer flows, and the Northgate and Eastfield boreholes made up the difference. The board planted 2.4 hectares of woodland along the upper Mill to reduce run-off, and its sludge was recycled to farmland for the ninth year running. Energy use per cubic metre fell by 6 percent after new pumps were fitted at the Riverside station, and solar panels on the Eastfield plant supplied 410 megawatt hours, about 12 percent of its needs.

9. Outlook. Next year the board will finish the Eastfield treatment stage, replace a further 1,500 lead service pipes, and begin a study of a second reservoir to meet demand from the 2,000 homes planned at Westbury. It will also publish monthly leakage figures on its website from June, and it will ask customers for their views on a new tariff for large gardens. The board thanks its staff, its contractors and the people of Millbrook for their patience during the Station Road works.
"""

CODE = """\
def parse_config(path):
    settings = {}
    with open(path) as f:
        for number, line in enumerate(f, start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                raise ValueError(f"line {number}: expected key = value")
            key, value = line.split("=", 1)
            settings[key.strip()] = value.strip()
    return settings


def load_settings(path, defaults):
    settings = dict(defaults)
    settings.update(parse_config(path))
    if "port" in settings:
        settings["port"] = int(settings["port"])
    if "debug" in settings:
        settings["debug"] = settings["debug"].lower() in ("1", "true", "yes")
    return settings


def describe(settings):
    lines = []
    for key in sorted(settings):
        lines.append(f"{key}: {settings[key]}")
    return "\\n".join(lines)
"""


def grounded_tasks(document=DOCUMENT, code=CODE):
    """(name, user message) pairs whose answers draw on the input."""
    return [
        ("summarise", "Summarise the following report in a few sentences, keeping the key figures.\n\n" + document),
        ("extract", "From the following report, copy out every sentence that contains a number of percent, "
                    "word for word.\n\n" + document),
        ("edit", "Rewrite the following report exactly, but replace the name Millbrook with Ashford "
                 "everywhere.\n\n" + document),
        ("code-edit", "Rename the function parse_config to read_config everywhere in this Python code and "
                      "return the whole code.\n\n" + code),
    ]


FREE_CHAT = [
    "Write a short story about a robot who learns to paint.",
    "What are the benefits of regular exercise?",
    "Give me three ideas for a birthday party for a ten year old.",
    "Explain why the sky is blue to a child.",
    "What should I pack for a weekend camping trip?",
    "Describe a perfect autumn day.",
]
