-- time: the server's clock in ms.
return now_ms()
