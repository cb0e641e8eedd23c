"""The fetch path: the fetch loop (BUbiNG's fetching threads), its HTTP client, robots.txt fetches, DNS."""
